"""Authorization: access tokens, the example authorization server, the resource side."""
