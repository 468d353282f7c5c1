// Work a session runs beside its turns: background jobs (`sh.background`) and sub-sessions
// (`spawn()`). Their commands, tasks and answers come from blocks and models, so they are
// inserted as text; a child's id becomes a link only inside `#…` (the page's own router).

import { el } from './dom.js';
import { enc, plural } from './format.js';

// How a job stands, in a few words: `running`, `exit 0`, `killed by its timeout`, `lost`.
export function jobState(j) {
  if (j.state === 'running') return 'running';
  if (j.how) return j.how;
  if (j.state === 'lost') return 'lost with its worker';
  if (j.timed_out) return 'killed by its timeout';
  if (j.killed) return 'killed by kill()';
  if (j.exit_code !== null && j.exit_code !== undefined) return `exit ${j.exit_code}`;
  if (j.signal !== null && j.signal !== undefined) return `killed by signal ${j.signal}`;
  return 'ended';
}

// Applies a `job_started` / `job_finished` event to a list of jobs as the API gives them.
export function applyJobEvent(jobs, ev) {
  const known = jobs.find((j) => j.id === ev.id);
  if (ev.type === 'job_started') {
    if (!known) jobs.push({ id: ev.id, command: ev.command, artifact: ev.artifact, state: 'running' });
    return jobs;
  }
  const job = known || { id: ev.id, command: '', artifact: '' };
  if (!known) jobs.push(job);
  job.state = ev.lost ? 'lost' : 'finished';
  job.exit_code = ev.exit_code;
  // How it ended, as the line the model is told says it (`finished: killed by its timeout, …`).
  const how = /\bfinished: ([^,(]+),/.exec(ev.line || '');
  if (how) job.how = how[1].trim();
  return jobs;
}

export const runningJobs = (jobs) => (jobs || []).filter((j) => j.state === 'running').length;

// The session's jobs for its head: how many run, then each with its state and command; no
// line (an empty list, to spread) when it has none.
export function jobsLine(jobs) {
  if (!jobs || !jobs.length) return [];
  const running = runningJobs(jobs);
  return [el('div', { class: 'meta jobs' },
    `${plural(jobs.length, 'background job')}${running ? ` (${running} running)` : ''}: `,
    ...jobs.map((j) => el('span', { class: 'job', 'data-id': j.id, 'data-state': j.state },
      `job ${j.id} ${jobState(j)}: ${j.command} `)))];
}

// A link that opens sub-session `id` in this page.
export const sessionLink = (id, cls) => el('a', { href: `#${enc(id)}`, class: `sid ${cls || ''}`.trim() }, id);

// The first line of an untrusted text, cut to `n` characters.
export const firstLine = (text, n) => String(text || '').split('\n')[0].slice(0, n);

// The notices of a turn's `child_started` / `child_finished` events, each with the link.
export function childNotice(ev) {
  if (ev.type === 'child_started') {
    return el('div', { class: 'notice child', 'data-child': ev.child }, 'sub-session ',
      sessionLink(ev.child, 'child-link'), ` started (t${ev.turn}/i${ev.iteration}): ${firstLine(ev.task, 120)}`);
  }
  return el('div', { class: 'notice child', 'data-child': ev.child }, 'sub-session ',
    sessionLink(ev.child, 'child-link'), ` ${ev.status}${ev.answer ? ` — ${firstLine(ev.answer, 120)}` : ''}`);
}

// The sub-sessions a block spawned, under its card: each a link with its status and answer.
export function childrenBox(children) {
  return el('div', { class: 'children' }, ...children.map((c) => el('div', { class: 'child' },
    'sub-session ', sessionLink(c.link.child, 'child-link'),
    ` ${c.status}${c.answer ? ` — ${firstLine(c.answer, 120)}` : ''}`)));
}
