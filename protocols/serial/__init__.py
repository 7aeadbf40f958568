"""protocols/serial"""
