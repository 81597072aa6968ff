"""Planted faulty implementations: each must make a suite fail."""
