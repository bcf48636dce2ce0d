error({code = 3})
