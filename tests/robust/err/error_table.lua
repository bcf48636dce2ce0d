error({code = 3})
-- expect: tests/robust/err/error_table.lua:1: error: (error object is a table value)
