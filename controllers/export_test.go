package controllers

// LedgerClaim exposes ledgerClaim to the external tests.
var LedgerClaim = ledgerClaim
