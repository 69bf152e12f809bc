VALUE = "absolute"
