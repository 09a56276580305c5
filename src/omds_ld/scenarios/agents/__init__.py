"""Agents the runner can run: the reference agent (no model) and model adapters."""
