"""protocols/goose"""
