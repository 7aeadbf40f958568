"""controller/goose"""
