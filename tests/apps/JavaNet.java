// SPDX-License-Identifier: MIT
// Java's three ways to a TCP connection, for smc_java.sh: com.sun.net.httpserver
// (a thread pool) with java.net.http.HttpClient, blocking java.net.Socket with
// read timeouts (a read then waits in poll), and an NIO Selector (epoll).
//   java JavaNet.java servers HTTP_PORT ECHO_PORT NIO_PORT
//   java JavaNet.java clients HTTP_PORT ECHO_PORT NIO_PORT FILE N
// The clients send FILE N times on each (N concurrent connections each), check
// every echo by its sha256, print one line per kind and exit 1 if any differed.
import com.sun.net.httpserver.*;
import java.io.*;
import java.net.*;
import java.net.http.*;
import java.nio.*;
import java.nio.channels.*;
import java.nio.file.*;
import java.security.*;
import java.util.*;
import java.util.concurrent.*;

public class JavaNet {
    static String hex(byte[] d) { StringBuilder s = new StringBuilder(); for (byte b : d) s.append(String.format("%02x", b)); return s.toString(); }
    static String sha(byte[] d) throws Exception { return hex(MessageDigest.getInstance("SHA-256").digest(d)); }

    public static void main(String[] a) throws Exception {
        int http = Integer.parseInt(a[1]), echo = Integer.parseInt(a[2]), nio = Integer.parseInt(a[3]);
        if (a[0].equals("servers")) {
            httpServer(http);
            new Thread(() -> { try { echoServer(echo); } catch (Exception e) { e.printStackTrace(); System.exit(3); } }).start();
            nioServer(nio);
            return;
        }
        byte[] data = Files.readAllBytes(Path.of(a[4]));
        int n = Integer.parseInt(a[5]);
        boolean ok = httpClient(http, data, n);
        ok &= echoClient(echo, data, n);
        ok &= nioClient(nio, data, n);
        System.exit(ok ? 0 : 1);
    }

    static void httpServer(int port) throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 64);
        s.createContext("/echo", ex -> {
            byte[] body = ex.getRequestBody().readAllBytes();
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) { o.write(body); }
        });
        s.setExecutor(Executors.newFixedThreadPool(4));
        s.start();
    }

    static boolean httpClient(int port, byte[] data, int n) throws Exception {
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        URI u = URI.create("http://127.0.0.1:" + port + "/echo");
        List<CompletableFuture<HttpResponse<byte[]>>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++)
            fs.add(c.sendAsync(HttpRequest.newBuilder(u).POST(HttpRequest.BodyPublishers.ofByteArray(data)).build(),
                               HttpResponse.BodyHandlers.ofByteArray()));
        String want = sha(data);
        int good = 0;
        for (var f : fs) { var r = f.get(); if (r.statusCode() == 200 && sha(r.body()).equals(want)) good++; }
        System.out.println("http " + good + "/" + n + " echoes of " + data.length + " bytes intact");
        return good == n;
    }

    static void echoServer(int port) throws Exception {
        ServerSocket ss = new ServerSocket();
        ss.bind(new InetSocketAddress("127.0.0.1", port), 64);
        while (true) {
            Socket c = ss.accept();
            new Thread(() -> {
                try (c) {
                    c.setSoTimeout(20000);
                    InputStream in = c.getInputStream(); OutputStream out = c.getOutputStream();
                    byte[] b = new byte[65536]; int r;
                    while ((r = in.read(b)) > 0) out.write(b, 0, r);
                } catch (IOException e) { System.err.println("echo-server: " + e); }
            }).start();
        }
    }

    static boolean echoClient(int port, byte[] data, int threads) throws Exception {
        String want = sha(data);
        ExecutorService ex = Executors.newFixedThreadPool(threads * 2);
        List<Future<Boolean>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) fs.add(ex.submit(() -> {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 10000);
                s.setSoTimeout(20000);
                OutputStream out = s.getOutputStream();
                Future<?> w = ex.submit(() -> { out.write(data); s.shutdownOutput(); return null; });
                InputStream in = s.getInputStream();
                ByteArrayOutputStream got = new ByteArrayOutputStream();
                byte[] b = new byte[65536]; int r;
                while ((r = in.read(b)) > 0) got.write(b, 0, r);
                w.get();
                return sha(got.toByteArray()).equals(want);
            }
        }));
        int good = 0;
        for (var f : fs) if (f.get()) good++;
        ex.shutdown();
        System.out.println("socket " + good + "/" + threads + " echoes of " + data.length + " bytes intact");
        return good == threads;
    }

    static void nioServer(int port) throws Exception {
        Selector sel = Selector.open();
        ServerSocketChannel ss = ServerSocketChannel.open();
        ss.bind(new InetSocketAddress("127.0.0.1", port), 64);
        ss.configureBlocking(false);
        ss.register(sel, SelectionKey.OP_ACCEPT);
        while (true) {
            sel.select();
            for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext();) {
                SelectionKey k = it.next(); it.remove();
                if (k.isAcceptable()) {
                    SocketChannel c = ss.accept();
                    if (c == null) continue;
                    c.configureBlocking(false);
                    c.register(sel, SelectionKey.OP_READ, new ArrayDeque<ByteBuffer>());
                    continue;
                }
                SocketChannel c = (SocketChannel) k.channel();
                @SuppressWarnings("unchecked") ArrayDeque<ByteBuffer> q = (ArrayDeque<ByteBuffer>) k.attachment();
                try {
                    if (k.isReadable()) {
                        ByteBuffer b = ByteBuffer.allocate(65536);
                        int r = c.read(b);
                        if (r < 0) { if (q.isEmpty()) c.close(); else k.interestOps(SelectionKey.OP_WRITE); q.add(ByteBuffer.allocate(0)); continue; }
                        b.flip(); if (b.hasRemaining()) q.add(b);
                    }
                    if (k.isValid() && (k.isWritable() || !q.isEmpty())) {
                        while (!q.isEmpty()) {
                            ByteBuffer h = q.peek();
                            if (h.capacity() == 0) { c.close(); break; }
                            c.write(h);
                            if (h.hasRemaining()) break;
                            q.poll();
                        }
                        if (c.isOpen()) {
                            boolean eof = !q.isEmpty() && q.peekLast().capacity() == 0;
                            k.interestOps((q.isEmpty() ? 0 : SelectionKey.OP_WRITE) | (eof ? 0 : (q.size() > 16 ? 0 : SelectionKey.OP_READ)));
                        }
                    }
                } catch (IOException e) { System.err.println("nio-server: " + e); c.close(); }
            }
        }
    }

    static boolean nioClient(int port, byte[] data, int conns) throws Exception {
        String want = sha(data);
        Selector sel = Selector.open();
        Map<SocketChannel, Object[]> st = new HashMap<>();
        for (int i = 0; i < conns; i++) {
            SocketChannel c = SocketChannel.open();
            c.configureBlocking(false);
            c.connect(new InetSocketAddress("127.0.0.1", port));
            c.register(sel, SelectionKey.OP_CONNECT);
            st.put(c, new Object[]{ByteBuffer.wrap(data), new ByteArrayOutputStream()});
        }
        int done = 0, good = 0;
        while (done < conns) {
            if (sel.select(30000) == 0) { System.err.println("nio-client: no progress in 30 s"); return false; }
            for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext();) {
                SelectionKey k = it.next(); it.remove();
                SocketChannel c = (SocketChannel) k.channel();
                Object[] s = st.get(c);
                ByteBuffer out = (ByteBuffer) s[0]; ByteArrayOutputStream got = (ByteArrayOutputStream) s[1];
                if (k.isConnectable()) { c.finishConnect(); k.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE); continue; }
                if (k.isWritable()) {
                    c.write(out);
                    if (!out.hasRemaining()) { c.shutdownOutput(); k.interestOps(SelectionKey.OP_READ); }
                }
                if (k.isReadable()) {
                    ByteBuffer b = ByteBuffer.allocate(65536);
                    int r = c.read(b);
                    if (r < 0) { done++; if (sha(got.toByteArray()).equals(want)) good++; c.close(); continue; }
                    got.write(b.array(), 0, r);
                }
            }
        }
        System.out.println("nio " + good + "/" + conns + " echoes of " + data.length + " bytes intact");
        return good == conns;
    }
}
