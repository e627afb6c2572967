// A stand-in for vscode-languageclient/node: the extension only needs its State enum here (tests inject a client).

export enum State {
  Stopped = 1,
  Running = 2,
  Starting = 3,
}

export class LanguageClient {
  constructor() {
    throw new Error("tests inject their own client");
  }
}
