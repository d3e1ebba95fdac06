"""Helpers for running tulip_memory against a real PostgreSQL in development and tests."""
