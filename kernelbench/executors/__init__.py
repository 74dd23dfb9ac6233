"""Executors: many evaluations at once, on this machine (threads) or on a Ray cluster (actors)."""
