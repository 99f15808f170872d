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
#include "jsonout.h"

/* Whether the answer to r (a one-step round's, or a committed reservation's when commit)
 * carries a signed receipt: the daemon signs (--signing-key) and r charged (not a dry run,
 * not a reservation). */
int res_receipt_due(const http_request *req, const ledger_round_res *r, int commit);

/* The signed receipt of that charge written into w as a value (after its key): the round
 * id, the clients charged with their spend before and after, the event's digest (base64
 * SHA-256 of the RFC 8785 bytes of ev as the daemon writes an event in JSON,
 * codec_encode_event; left out when ev is NULL), the leaf index of the record that charged
 * them (the ROUND record, or the COMMIT record), a timestamp (ms since the epoch), key_id,
 * and signature: the signing key's Ed25519 signature of the RFC 8785 bytes of the other
 * members (the text is those bytes with the signature appended as the last member). memo:
 * NULL, or the numbers the answer already wrote (jsonout.h), whose digits are then reused.
 * 0, or -1 (out of memory; w failed). Only when res_receipt_due. */
int res_receipt_write(const http_request *req, const ledger_round_res *r, int commit,
                      const dp_event *ev, const jsonout_memo *memo, jsonout_w *w);
#endif
