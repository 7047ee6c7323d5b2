"""Week 1, day 1: naive loads — coalescing, vector width, bytes in flight."""
