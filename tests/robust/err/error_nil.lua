error()
-- expect: tests/robust/err/error_nil.lua:1: error: (error object is a nil value)
