// Three conclave nodes in one C# program through P/Invoke (EMB-3), seed 000's host
// language: the flow of three_nodes.c, with the callbacks' order checked: each node's
// leader-changed callbacks come in the order the node published them, so their terms never
// go down, and the last one names the leader the node reports.
//
// usage: mono ThreeNodes.exe ID_A A.toml ID_B B.toml ID_C C.toml   (libconclave.so on
// LD_LIBRARY_PATH)

using System;
using System.Collections.Generic;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

static class Conclave
{
    public const int Ok = 0;
    public const int ErrInvalidArgument = -1;
    public const int ErrInvalidHandle = -2;
    public const int ErrConfig = -3;
    public const int ErrStopped = -5;
    public const int PeerConnected = 1;
    public const int PeerIdSize = 36;

    [StructLayout(LayoutKind.Sequential, CharSet = CharSet.Ansi)]
    public struct Peer
    {
        [MarshalAs(UnmanagedType.ByValTStr, SizeConst = PeerIdSize)]
        public string Id;
        public int Status;
        public long RttUs;
    }

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void LeaderChangedCallback(IntPtr leader, ulong term, int role, IntPtr userData);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void PeerStatusCallback(IntPtr peerId, int oldStatus, int newStatus, IntPtr userData);

    const string Lib = "conclave";

    [DllImport(Lib)] public static extern int ConclaveStart(byte[] configToml, out ulong handle);
    [DllImport(Lib)] public static extern int ConclaveStop(ulong handle);
    [DllImport(Lib)] public static extern int SetLeader(ulong handle, byte[] peerId);
    [DllImport(Lib)] public static extern int EnableAutoLeaderElection(ulong handle, [MarshalAs(UnmanagedType.I1)] bool enabled);
    [DllImport(Lib)] public static extern int GetCurrentLeader(ulong handle, byte[] leader, UIntPtr leaderLen, out ulong term);
    [DllImport(Lib)] public static extern int IsLeader(ulong handle);
    [DllImport(Lib)] public static extern int GetPeerList(ulong handle, [Out] Peer[] peers, UIntPtr capacity, out UIntPtr count);
    [DllImport(Lib)] public static extern int RegisterPeerStatusCallback(ulong handle, PeerStatusCallback callback, IntPtr userData);
    [DllImport(Lib)] public static extern int RegisterLeaderChangedCallback(ulong handle, LeaderChangedCallback callback, IntPtr userData);
    [DllImport(Lib)] public static extern int ConclaveLastError(byte[] message, UIntPtr messageLen);

    public static byte[] CString(string text)
    {
        return Encoding.UTF8.GetBytes(text + "\0");
    }

    public static string FromBuffer(byte[] buffer)
    {
        int end = Array.IndexOf(buffer, (byte)0);
        return Encoding.UTF8.GetString(buffer, 0, end < 0 ? buffer.Length : end);
    }

    public static string LastError()
    {
        var message = new byte[1024];
        ConclaveLastError(message, (UIntPtr)message.Length);
        return FromBuffer(message);
    }
}

class Node
{
    public readonly string Id;
    public readonly ulong Handle;
    readonly object gate = new object();
    readonly List<KeyValuePair<string, ulong>> leaderEvents = new List<KeyValuePair<string, ulong>>();
    public int PeerEvents;
    public int ReentrantAnswers;
    public int ReentrantFailures;
    // Kept in fields: the delegates must outlive every call the library makes to them.
    readonly Conclave.LeaderChangedCallback onLeader;
    readonly Conclave.PeerStatusCallback onPeer;

    public Node(string id, string toml)
    {
        Id = id;
        ulong handle;
        Program.Check(Conclave.ConclaveStart(Conclave.CString(toml), out handle) == Conclave.Ok, "start " + id + ": " + Conclave.LastError());
        Handle = handle;
        onLeader = OnLeaderChanged;
        onPeer = OnPeerStatus;
        Program.Check(Conclave.RegisterLeaderChangedCallback(Handle, onLeader, IntPtr.Zero) == Conclave.Ok, Conclave.LastError());
        Program.Check(Conclave.RegisterPeerStatusCallback(Handle, onPeer, IntPtr.Zero) == Conclave.Ok, Conclave.LastError());
    }

    void OnLeaderChanged(IntPtr leader, ulong term, int role, IntPtr userData)
    {
        int leads = Conclave.IsLeader(Handle); // a call back into the library, from its callback thread
        string name = Marshal.PtrToStringAnsi(leader);
        lock (gate)
        {
            if (leads == 0 || leads == 1) ReentrantAnswers++;
            else if (leads != Conclave.ErrStopped && leads != Conclave.ErrInvalidHandle) ReentrantFailures++;
            leaderEvents.Add(new KeyValuePair<string, ulong>(name, term));
        }
    }

    void OnPeerStatus(IntPtr peerId, int oldStatus, int newStatus, IntPtr userData)
    {
        lock (gate) PeerEvents++;
    }

    public List<KeyValuePair<string, ulong>> LeaderEvents()
    {
        lock (gate) return new List<KeyValuePair<string, ulong>>(leaderEvents);
    }

    public KeyValuePair<string, ulong> CurrentLeader()
    {
        var name = new byte[Conclave.PeerIdSize];
        ulong term;
        Program.Check(Conclave.GetCurrentLeader(Handle, name, (UIntPtr)name.Length, out term) == Conclave.Ok, Conclave.LastError());
        return new KeyValuePair<string, ulong>(Conclave.FromBuffer(name), term);
    }

    public bool IsLeader()
    {
        int leads = Conclave.IsLeader(Handle);
        Program.Check(leads == 0 || leads == 1, "IsLeader " + leads + ": " + Conclave.LastError());
        return leads == 1;
    }

    // The term of a leader-changed callback naming `wanted` (any leader when null) above `above`; 0 if none.
    public ulong SawLeader(string wanted, ulong above)
    {
        foreach (var e in LeaderEvents())
            if (e.Key != "" && (wanted == null || e.Key == wanted) && e.Value > above) return e.Value;
        return 0;
    }
}

static class Program
{
    const int PatienceMs = 30000;

    public static void Check(bool condition, string message)
    {
        if (!condition)
        {
            Console.Error.WriteLine("check failed: " + message);
            Environment.Exit(1);
        }
    }

    static T WaitFor<T>(string what, Func<T> probe) where T : class
    {
        var deadline = DateTime.UtcNow.AddMilliseconds(PatienceMs);
        while (true)
        {
            T value = probe();
            if (value != null) return value;
            Check(DateTime.UtcNow < deadline, "never saw " + what);
            Thread.Sleep(20);
        }
    }

    static Tuple<Node, ulong> AgreedLeader(List<Node> nodes)
    {
        string name = null;
        ulong term = 0;
        foreach (var node in nodes)
        {
            var current = node.CurrentLeader();
            if (current.Key == "" || (name != null && current.Key != name)) return null;
            name = current.Key;
            term = current.Value;
        }
        var leading = nodes.FindAll(node => node.IsLeader());
        if (leading.Count != 1 || leading[0].Id != name) return null;
        return Tuple.Create(leading[0], term);
    }

    static int Main(string[] args)
    {
        Check(args.Length == 6, "usage: ThreeNodes.exe ID_A A.toml ID_B B.toml ID_C C.toml");
        var nodes = new List<Node>();
        for (int i = 0; i < 3; i++) nodes.Add(new Node(args[2 * i], File.ReadAllText(args[2 * i + 1])));

        var first = WaitFor("one leader agreed by all three", () => AgreedLeader(nodes));
        Node leader = first.Item1;
        ulong term = first.Item2;
        Console.WriteLine("leader " + leader.Id + " in term " + term);
        WaitFor("the leader's own callback", () => leader.SawLeader(leader.Id, 0) > 0 ? leader : null);

        var peers = new Conclave.Peer[3];
        UIntPtr count;
        Check(Conclave.GetPeerList(leader.Handle, peers, (UIntPtr)peers.Length, out count) == Conclave.Ok, Conclave.LastError());
        Check((int)count == 2, "the leader has " + count + " peers");
        for (int i = 0; i < 2; i++) Check(peers[i].Status == Conclave.PeerConnected && peers[i].Id.StartsWith("ffi-"), "peer " + peers[i].Id);

        Check(Conclave.IsLeader(0) == Conclave.ErrInvalidHandle, "a zero handle");
        Check(Conclave.SetLeader(leader.Handle, Conclave.CString("not a valid id!")) == Conclave.ErrInvalidArgument, "a bad peer id");
        ulong refused;
        Check(Conclave.ConclaveStart(Conclave.CString("[election]\nmode = \"paxos\"\n"), out refused) == Conclave.ErrConfig, "a bad mode");
        Check(Conclave.LastError().Contains("election.mode"), Conclave.LastError());
        Check(Conclave.EnableAutoLeaderElection(leader.Handle, true) == Conclave.Ok, "EnableAutoLeaderElection: " + Conclave.LastError());

        Node target = nodes[(nodes.IndexOf(leader) + 1) % 3];
        Check(Conclave.SetLeader(leader.Handle, Conclave.CString(target.Id)) == Conclave.Ok, Conclave.LastError());
        ulong movedTerm = 0;
        WaitFor("SetLeader moving leadership", () =>
        {
            movedTerm = target.SawLeader(target.Id, term);
            return movedTerm > 0 && target.IsLeader() ? target : null;
        });
        Console.WriteLine("set_leader moved leadership to " + target.Id + " in term " + movedTerm);

        Check(Conclave.ConclaveStop(target.Handle) == Conclave.Ok, Conclave.LastError());
        Check(Conclave.IsLeader(target.Handle) == Conclave.ErrInvalidHandle, "a stopped handle was accepted");
        var survivors = nodes.FindAll(node => node != target);
        foreach (var node in survivors)
            WaitFor(node.Id + " hearing of a successor", () => node.SawLeader(null, movedTerm) > 0 ? node : null);
        var after = WaitFor("the survivors agreeing", () => AgreedLeader(survivors));
        Check(after.Item1 != target && after.Item2 > movedTerm, "successor " + after.Item1.Id + " in term " + after.Item2);
        Console.WriteLine("after the stop, " + after.Item1.Id + " leads in term " + after.Item2);

        foreach (var node in survivors) Check(Conclave.ConclaveStop(node.Handle) == Conclave.Ok, Conclave.LastError());
        foreach (var node in nodes)
        {
            var events = node.LeaderEvents();
            for (int i = 1; i < events.Count; i++)
                Check(events[i - 1].Value <= events[i].Value, node.Id + ": callbacks out of order at " + i);
            Check(node.ReentrantFailures == 0, node.Id + ": IsLeader failed inside a callback");
            Check(node.ReentrantAnswers > 0, node.Id + ": IsLeader never answered inside a callback");
            Check(node.PeerEvents > 0, node.Id + ": no peer status callback");
        }
        // Every survivor's callbacks told it of the successor, in the successor's term.
        foreach (var node in survivors)
            Check(node.LeaderEvents().Exists(e => e.Key == after.Item1.Id && e.Value == after.Item2),
                  node.Id + ": no callback named " + after.Item1.Id + " in term " + after.Item2);
        Console.WriteLine("ok");
        return 0;
    }
}
