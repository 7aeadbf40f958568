"""controller/logic"""
