"""Pure math and data types of mappa: torch, numpy and the standard library only (a test enforces this)."""
