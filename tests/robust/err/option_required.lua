local ckpt = kiln.option("checkpoint")
kiln.output("y", kiln.input("x", {4}))
-- expect: tests/robust/err/option_required.lua:1: error: option checkpoint is required: give it with -D checkpoint=VALUE
