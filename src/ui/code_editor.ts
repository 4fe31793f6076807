// CodeMirror 6 as a read-only code view, in a module of its own so the app's first load does not
// carry it: CodeView.svelte imports it when a code view is first shown (its chunk is ~0.5 MB of the
// 1.6 MB the first screen loaded before).
import { javascript } from '@codemirror/lang-javascript';
import { EditorState } from '@codemirror/state';
import { oneDark } from '@codemirror/theme-one-dark';
import { EditorView } from '@codemirror/view';
import { basicSetup } from 'codemirror';

/** A read-only, syntax-highlighted view of `code` in `parent`; destroy() removes it. */
export function readOnlyEditor(parent: HTMLElement, code: string, dark: boolean, label: string): { destroy(): void } {
  return new EditorView({
    parent,
    state: EditorState.create({
      doc: code,
      extensions: [
        basicSetup,
        javascript(),
        EditorState.readOnly.of(true),
        EditorView.editable.of(false),
        EditorView.contentAttributes.of({ 'aria-label': label }),
        ...(dark ? [oneDark] : []),
      ],
    }),
  });
}
