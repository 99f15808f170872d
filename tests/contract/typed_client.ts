// typed_client.ts - a client written against the types generated from openapi.yaml
// (openapi-typescript, into gen/openapi.ts) and called through openapi-fetch. It must compile
// with tsc --strict and no casts (typed-client.sh refuses the file if it holds one): a
// request the schema cannot express, or an answer whose fields the schema leaves optional,
// would need one. Then it runs against a live daemon at $DPBUDGET_URL and checks the
// answers, closing with "client: N passed, M failed".
import createClient from 'openapi-fetch';
import type { components, paths } from './gen/openapi';

type Event = components['schemas']['Event'];
type Client = components['schemas']['Client'];
type Round = components['schemas']['Round'];

const api = createClient<paths>({ baseUrl: process.env.DPBUDGET_URL ?? 'http://127.0.0.1:8080' });

let passed = 0;
let failed = 0;
function check(ok: boolean, what: string): void {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.log(`FAIL ${what}`);
  }
}

// "infinite" or a number: the schema's Real
function finite(x: number | 'infinite'): number {
  return x === 'infinite' ? Infinity : x;
}

async function run(): Promise<void> {
  const epoch: Event = { class_name: 'ShuffledDpSgdEpochDpEvent', noise_multiplier: 1.0, rounds: 1140369 };

  // delta(epsilon) of one shuffled epoch, Theorem 4.1
  const d = await api.POST('/v1/delta', { body: { event: epoch, epsilon: 1.0, accountant: 'thm41' } });
  if (d.data) {
    const first = d.data.results[0];
    check(first !== undefined && first.delta > 0 && first.delta < 1, `delta: ${JSON.stringify(first)}`);
    check(d.data.guarantee === 'upper_bound', `delta guarantee ${d.data.guarantee}`);
  } else {
    check(false, `delta: ${JSON.stringify(d.error)}`);
  }

  // calibrate the noise of a Gaussian mechanism: noise_multiplier left out of the event
  const noise = await api.POST('/v1/calibrate', {
    body: {
      event: { class_name: 'GaussianDpEvent' },
      solve_for: 'noise_multiplier',
      target: { epsilon: 1.0, delta: 1e-5 },
    },
  });
  if (noise.data) {
    const sigma: number = noise.data.value;
    check(sigma > 3 && sigma < 6, `calibrated noise_multiplier ${sigma}`);
    check(noise.data.achieved.delta <= 1e-5, 'achieved delta');
  } else {
    check(false, `calibrate noise: ${JSON.stringify(noise.error)}`);
  }

  // calibrate the rounds of a shuffled epoch (null: "solve this one")
  const rounds = await api.POST('/v1/calibrate', {
    body: {
      event: { class_name: 'ShuffledDpSgdEpochDpEvent', noise_multiplier: 1.0, rounds: null },
      solve_for: 'rounds',
      target: { epsilon: 0, delta: 0.01 },
      accountant: 'thm41',
    },
  });
  if (rounds.data) {
    check(Number.isInteger(rounds.data.value) && rounds.data.value > 1000, `calibrated rounds ${rounds.data.value}`);
  } else {
    check(false, `calibrate rounds: ${JSON.stringify(rounds.error)}`);
  }

  // a client, a round charged to it, and the client read back
  const id = `typed-${process.pid}`;
  const put = await api.PUT('/v1/clients/{id}', {
    params: { path: { id } },
    body: { budget: { epsilon: 4.0, delta: 1e-5 }, labels: { site: 'typed' } },
  });
  check(put.response.status === 201, `PUT client: ${put.response.status}`);

  const round = await api.POST('/v1/rounds', {
    body: {
      round_id: `${id}-r1`,
      event: { class_name: 'GaussianDpEvent', noise_multiplier: 5.0 },
      participants: [id, `${id}-ghost`],
      policy: 'admit_eligible',
    },
  });
  if (round.data) {
    const r: Round = round.data;
    check(r.charged === 1 && r.admitted.length === 1 && r.refused.length === 1, `round: ${JSON.stringify(r)}`);
    const ghost = r.refused[0];
    check(ghost !== undefined && ghost.reason === 'unknown_client' && ghost.spent_before === undefined, 'unknown client refused without figures');
  } else {
    check(false, `round: ${JSON.stringify(round.error)}`);
  }

  const got = await api.GET('/v1/clients/{id}', { params: { path: { id } } });
  if (got.data) {
    const c: Client = got.data;
    const spent: number = finite(c.spent.epsilon);
    check(c.rounds === 1 && spent > 0 && spent <= c.budget.epsilon, `client: ${JSON.stringify(c)}`);
    check(c.status === 'active' && c.remaining.epsilon === c.budget.epsilon - spent, 'client status and remaining budget');
  } else {
    check(false, `GET client: ${JSON.stringify(got.error)}`);
  }

  // an error is typed as a problem
  const bad = await api.POST('/v1/delta', { body: { event: epoch, epsilon: 1.0, neighboring_relation: 'replace_one', accountant: 'thm41' } });
  check(bad.error !== undefined && bad.error.code === 'unsupported' && bad.response.status === 422, `problem: ${JSON.stringify(bad.error)}`);
}

run()
  .catch((e: unknown) => {
    failed++;
    console.log(`FAIL ${String(e)}`);
  })
  .finally(() => {
    console.log(`client: ${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0); // not waiting for fetch's idle keep-alive sockets
  });
