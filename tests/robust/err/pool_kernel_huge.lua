local x = kiln.input("x", {1, 1, 4, 4})
kiln.output("y", kiln.maxpool2d(x, 1e12))
-- expect: tests/robust/err/pool_kernel_huge.lua:2: error: maxpool2d: kernel value 1000000000000 is out of range
