// expect.mjs - the checks the server test clients share (client.mjs, tools.mjs, embed.mjs):
// `check` fails the run with one message on stderr (the C suite that runs the client shows
// it), `expectError` wants a request to fail with an error in OpenAI's shape.
import OpenAI from 'openai';

export function checks(label) {
  function check(cond, msg) {
    if (!cond) {
      console.error(`${label}: ${msg}`);
      process.exit(1);
    }
  }
  // p must reject with an API error of this status and a message (naming param and holding
  // text where given); returns the error body.
  async function expectError(p, status, what, param, text) {
    try {
      await p;
    } catch (e) {
      check(e instanceof OpenAI.APIError, `${what}: not an API error: ${e}`);
      check(e.status === status, `${what}: status ${e.status}, want ${status}`);
      check(typeof e.error?.message === 'string' && e.error.message.length > 0, `${what}: no error message`);
      check(!param || e.error.param === param, `${what}: param ${e.error.param}, want ${param}`);
      check(!text || e.error.message.includes(text), `${what}: message "${e.error.message}" lacks "${text}"`);
      return e.error;
    }
    check(false, `${what}: accepted`);
  }
  return { check, expectError };
}
