"""Reversible compression (CCR): the originals store, the marker grammar, the retrieve tool."""
