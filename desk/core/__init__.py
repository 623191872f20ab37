"""Foundations every other part of desk stands on: settings, clock, logging, metrics and tracing, the database and Redis handles, the tables, input checks and the domain's expected errors."""
