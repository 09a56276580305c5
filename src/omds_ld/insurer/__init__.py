"""The example insurers' interface: an OMDS LD server for insurers given as data."""
