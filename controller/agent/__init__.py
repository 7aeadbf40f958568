"""controller/agent"""
