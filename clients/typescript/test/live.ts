// The live server the tests run against (started by clients/testserver.py).

export interface Live {
  url: string;
  appToken: string;
  agentToken: string;
}

/** The server's address and tokens; missing ones are an error, never a skip. */
export function live(): Live {
  const names = ["MEMHOST_TEST_URL", "MEMHOST_TEST_APP_TOKEN", "MEMHOST_TEST_AGENT_TOKEN"] as const;
  const missing = names.filter((n) => !process.env[n]);
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(", ")} unset: run the tests through clients/testserver.py (make clients-test), which starts a live memhost serve`,
    );
  }
  return {
    url: process.env.MEMHOST_TEST_URL!,
    appToken: process.env.MEMHOST_TEST_APP_TOKEN!,
    agentToken: process.env.MEMHOST_TEST_AGENT_TOKEN!,
  };
}

export function unique(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 12)}`;
}
