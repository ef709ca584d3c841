"""The sandbox websites' pages, one module per site; each view gets the session's SiteState as `state`."""
