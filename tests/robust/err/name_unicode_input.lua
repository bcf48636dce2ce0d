local x = kiln.input("héllo", {4})
-- expect: tests/robust/err/name_unicode_input.lua:1: error: kiln.input: name 'héllo' is not a C identifier (letters, digits, _; not starting with a digit)
