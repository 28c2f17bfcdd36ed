/**
 * nbkit-viewer: open SeaStreamer stream files (`*.ss`) in JupyterLab.
 *
 * Registers the file type "SeaStreamer stream file" with its icon and a document widget factory that is
 * the default for it, so a double-click in the file browser opens the viewer. The document's model is
 * never filled with the file: its model factory asks the contents API for no content, and the viewer reads
 * bounded pages from nbkit's server extension instead (see nbkit/lab/handlers.py).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IDocumentManager } from '@jupyterlab/docmanager';
import {
  ABCWidgetFactory,
  DocumentRegistry,
  DocumentWidget,
  TextModelFactory
} from '@jupyterlab/docregistry';
import { Contents } from '@jupyterlab/services';

import { streamIcon } from './icon';
import { StreamViewer } from './viewer';

const FILE_TYPE = 'seastreamer-stream';
const FACTORY = 'SeaStreamer stream viewer';
const MODEL = 'nbkit-stream';

/** A text model that is never loaded: `fileFormat` null makes the context ask for no content. */
class StreamModelFactory extends TextModelFactory {
  constructor() {
    super(false);
  }
  get name(): string {
    return MODEL;
  }
  get fileFormat(): Contents.FileFormat {
    return null;
  }
}

class StreamDocument extends DocumentWidget<StreamViewer> {}

class StreamViewerFactory extends ABCWidgetFactory<StreamDocument> {
  constructor(
    options: DocumentRegistry.IWidgetFactoryOptions<StreamDocument>,
    private readonly open: (path: string) => void
  ) {
    super(options);
  }

  protected createNewWidget(context: DocumentRegistry.Context): StreamDocument {
    const content = new StreamViewer(context.path, this.open);
    const widget = new StreamDocument({ content, context });
    widget.title.icon = streamIcon;
    context.pathChanged.connect((_, path) => {
      content.path = path;
    });
    return widget;
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbkit-viewer:plugin',
  description: 'Open SeaStreamer stream files (.ss): streams, messages, damage and live appends.',
  autoStart: true,
  requires: [IDocumentManager],
  activate: (app: JupyterFrontEnd, docManager: IDocumentManager) => {
    app.docRegistry.addFileType({
      name: FILE_TYPE,
      displayName: 'SeaStreamer stream file',
      extensions: ['.ss'],
      mimeTypes: ['application/x-seastreamer-stream'],
      fileFormat: null,
      contentType: 'file',
      icon: streamIcon
    });
    app.docRegistry.addModelFactory(new StreamModelFactory());
    const factory = new StreamViewerFactory(
      {
        name: FACTORY,
        label: 'Stream Viewer',
        modelName: MODEL,
        fileTypes: [FILE_TYPE],
        defaultFor: [FILE_TYPE],
        readOnly: true
      },
      path => {
        docManager.openOrReveal(path);
      }
    );
    app.docRegistry.addWidgetFactory(factory);
  }
};

export default plugin;
