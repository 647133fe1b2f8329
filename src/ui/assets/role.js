// Who the session is, and what its role allows: the pages draw only the
// actions it may take (the API refuses the rest with 403 anyway).

const RANK = { viewer: 0, operator: 1, admin: 2 };
let session = { name: "", role: "viewer" };

export function setSession(name, role) {
  session = { name, role: RANK[role] === undefined ? "viewer" : role };
}

export function whoami() {
  return session;
}

// Whether the session's role is `role` or above.
export function can(role) {
  return RANK[session.role] >= RANK[role];
}
