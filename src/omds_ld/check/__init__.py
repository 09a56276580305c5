"""The insurer checker: any insurer's interface checked against the norm, as an agent meets it."""
