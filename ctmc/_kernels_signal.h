/* Ctrl-C of the command line (included by _kernels.c): arm_sigint, sigint_armed.
 *
 * A SIGINT handler that writes a prepared line and ends the process with status 130, for the
 * `ctmc` command while a compiled kernel holds the CPU without the GIL.
 */
/* ---- Ctrl-C of the command line ------------------------------------------------------------ */

#ifndef _WIN32
static char sigint_message[256];      /* the line to print, set once by arm_sigint before the handler */
static size_t sigint_length;

/* Async-signal-safe: write(2) and _exit(2) only (no stdio, no Python, no allocation). */
static void exit_on_sigint(int sig)
{
    ssize_t written = write(2, sigint_message, sigint_length);
    (void)sig; (void)written;
    _exit(130);
}

static PyObject *py_arm_sigint(PyObject *self, PyObject *args)
{
    const char *msg;
    Py_ssize_t len;
    struct sigaction sa;
    if (!PyArg_ParseTuple(args, "y#", &msg, &len)) return NULL;
    if (len < 0 || (size_t)len >= sizeof sigint_message) {
        PyErr_Format(PyExc_ValueError, "arm_sigint: the message must be shorter than %d bytes",
                     (int)sizeof sigint_message);
        return NULL;
    }
    memcpy(sigint_message, msg, (size_t)len);
    sigint_length = (size_t)len;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = exit_on_sigint;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *py_sigint_armed(PyObject *self, PyObject *noargs)
{
    struct sigaction old;
    if (sigaction(SIGINT, NULL, &old) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(old.sa_handler == exit_on_sigint);
}
#endif
