"""controller/engine"""
