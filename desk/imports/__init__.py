"""Ticket imports ("sync"): reading a CSV, accepting an import, applying it in batches."""
