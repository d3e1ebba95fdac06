"""Expiry and retention sweeps: what keeps the database from keeping everything forever
(docs/operations.md).
"""
