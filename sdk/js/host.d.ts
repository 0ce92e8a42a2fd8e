export declare function log(level: 'trace' | 'debug' | 'info' | 'warn' | 'error', message: string): void;
export declare function progress(done: number, total: number | undefined, message: string): void;
