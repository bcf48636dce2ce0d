kiln.output()
-- expect: tests/robust/err/output_no_args.lua:1: error: kiln.output: argument 1 (the output's name) must be a string, got no value
