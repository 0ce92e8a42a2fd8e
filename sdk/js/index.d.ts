// Types for @longhand/tool. A schema built with `s` carries the TypeScript
// type of the values it accepts, so `run` gets a typed input.

export type Effect = 'read-only' | 'idempotent' | 'writes';

declare const Type: unique symbol;
declare const Optional: unique symbol;

/** A JSON Schema whose accepted values have type `T`. */
export interface Schema<T> {
  readonly [Type]?: T;
  readonly [key: string]: unknown;
}
/** A property that may be left out. */
export interface OptionalSchema<T> extends Schema<T> {
  readonly [Optional]: true;
}

export type Infer<S> = S extends Schema<infer T> ? T : unknown;

type RequiredKeys<P> = { [K in keyof P]: P[K] extends OptionalSchema<unknown> ? never : K }[keyof P];
type OptionalKeys<P> = { [K in keyof P]: P[K] extends OptionalSchema<unknown> ? K : never }[keyof P];
type ObjectOf<P> = { [K in RequiredKeys<P>]: Infer<P[K]> } & { [K in OptionalKeys<P>]?: Infer<P[K]> };

export declare const s: {
  string(extra?: object): Schema<string>;
  number(extra?: object): Schema<number>;
  integer(extra?: object): Schema<number>;
  boolean(extra?: object): Schema<boolean>;
  literal<V extends string | number | boolean | null>(...values: V[]): Schema<V>;
  array<T>(items: Schema<T>, extra?: object): Schema<T[]>;
  record<T>(values: Schema<T>): Schema<Record<string, T>>;
  nullable<T>(inner: Schema<T>): Schema<T | null>;
  optional<T>(inner: Schema<T>): OptionalSchema<T>;
  describe<S extends Schema<unknown>>(inner: S, description: string): S;
  object<P extends Record<string, Schema<unknown>>>(properties: P, extra?: object): Schema<ObjectOf<P>>;
};

export interface ToolDef<I, O> {
  /** Lowercase letters, digits, `-` and `_`; unique in the component. */
  name: string;
  /** What it does, written for the model. */
  description: string;
  /** What a call does to the world; default `read-only`. */
  effect?: Effect;
  /** An object schema: `s.object({...})` or a plain JSON Schema object. */
  input: Schema<I>;
  run(input: I): O | Promise<O>;
}

export interface Tool<I = unknown, O = unknown> extends Readonly<Required<ToolDef<I, O>>> {}

export declare function tool<I, O>(def: ToolDef<I, O>): Tool<I, O>;

export interface DirRequest {
  guestPath: string;
  why: string;
  writable?: boolean;
}

export interface ComponentDef {
  name: string;
  version: string;
  description: string;
  tools: Tool<any, any>[];
  /** What the tool asks the operator for; nothing is granted because it is asked for. */
  requests?: { dirs?: DirRequest[]; hosts?: string[]; env?: string[]; secrets?: string[] };
}

export type ToolError =
  | { tag: 'invalid-input'; val: string }
  | { tag: 'not-found'; val: string }
  | { tag: 'access-denied'; val: { resource: string; reason: string } }
  | { tag: 'failed'; val: string };

export declare function exportTools(def: ComponentDef): {
  describe(): unknown;
  call(name: string, input: string): string | Promise<string>;
};

export declare function outcome(
  tools: Tool<any, any>[],
  name: string,
  input: string,
): { ok: string } | { err: ToolError } | Promise<{ ok: string } | { err: ToolError }>;

export declare class InvalidInput extends Error {}
export declare class NotFound extends Error {}
/** `failed`, with the message as given (no error name in front). */
export declare class Failed extends Error {}
export declare class AccessDenied extends Error {
  constructor(resource: string, reason: string);
  readonly resource: string;
  readonly reason: string;
}
