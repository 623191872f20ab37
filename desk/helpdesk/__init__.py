"""The helpdesk itself: tickets, their filters and the in-app notifications."""
