"""Helpers shared by test modules (conftest files keep only fixtures)."""
