// What the page knows, in one object every module reads and updates: the sessions listed, the
// one shown, and the turns streaming in this page.

export const state = {
  sessions: [],
  current: null, // the selected session's id
  detail: null, // the last GET /api/sessions/{id} of it
  lives: new Map(), // session id -> the view of a turn streaming in this page
  needLogin: false,
};
