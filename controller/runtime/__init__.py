"""controller/runtime"""
