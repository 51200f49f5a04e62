// The server's log function, as every part takes it: a level, a message, and fields never holding a secret.
export type Log = (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
