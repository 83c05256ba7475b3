"""Deterministic simulation of the whole scheduler: one virtual clock, one seeded random source, faults by seed
(docs/simulation.md)."""
