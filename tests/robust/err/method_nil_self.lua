local x = kiln.input("x", {2})
kiln.output("y", x.relu(nil))
-- expect: tests/robust/err/method_nil_self.lua:2: error: relu: argument 1 must be a tensor, got nil
