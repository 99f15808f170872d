/*
 * res_sth.h - signed statements about the ledger's log (docs/TRANSPARENCY.md, "Signed tree
 * heads and receipts"): GET /v1/log/keys, GET /v1/log/sth (resources.h) and the receipt a
 * charge answer carries (res_rounds.c).
 */
#ifndef HTTP_RES_STH_H
#define HTTP_RES_STH_H

#include <jansson.h>
#include <stddef.h>

#include "../core/ledger/ledger.h"
#include "http.h"

/* The signed receipt of a charge (r: a one-step round's answer, or a committed
 * reservation's when commit), as JSON text (malloc'ed, *len bytes): the round id, the clients
 * charged with their spend before and after, the event's digest (base64 SHA-256 of the RFC
 * 8785 bytes of ev as the daemon writes an event in JSON, codec_encode_event; left out when
 * ev is NULL), the leaf index of the record that charged them (the ROUND record, or the
 * COMMIT record), a timestamp (ms since the epoch), key_id, and signature: the signing key's
 * Ed25519 signature of the RFC 8785 bytes of the other members (the text is those bytes with
 * the signature appended as the last member). NULL when the daemon signs nothing (no
 * --signing-key), out of memory, or r charged nobody (a dry run, a reservation). */
char *res_receipt(const http_request *req, const ledger_round_res *r, int commit,
                  const dp_event *ev, size_t *len);

#endif
