"""protocols/ethernet"""
