"""Head families whose code lives in one module each (litebert.heads names them)."""
