VALUE = "relative"
